"""Device models. Each module is one device, its register map at the top.

A model imports neither another model nor the CPU: the machine gives it a Clock (to
read time and schedule events) and IRQ lines (to signal the NVIC).
"""
