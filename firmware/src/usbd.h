/*
 * USB device driver for pkasim's full-speed controller (register map: docs/usb.md),
 * with the descriptors of a CCID smart-card reader: EP0 control, EP1 bulk OUT and
 * IN (the CCID messages), EP2 interrupt IN (slot change notifications).
 *
 * Everything runs from the USB interrupt (USB_IRQHandler): enumeration on EP0, the
 * bulk OUT reassembly of one CCID message into usbd_msg, the bulk IN transmission of
 * a reply. The main loop waits for usbd_msg_ready, handles the message, and sends
 * the reply with usbd_send; while it computes, usbd_busy(1) turns SOF interrupts on
 * and the CCID layer's sof callback may send a time extension.
 */
#ifndef PKASIM_USBD_H
#define PKASIM_USBD_H

#include <stdint.h>
#include "cmsis_min.h"

#define USB_BASE        0x40020000u
#define USB_IRQ         6u
#define USB_IRQHandler  IRQ6_Handler

#define USB_CTRL   REG32(USB_BASE + 0x00u)
#define USB_ISTR   REG32(USB_BASE + 0x04u)
#define USB_IER    REG32(USB_BASE + 0x08u)
#define USB_FNR    REG32(USB_BASE + 0x0Cu)
#define USB_DADDR  REG32(USB_BASE + 0x10u)
#define USB_PIPE(n) REG32(USB_BASE + 0x20u + 4u * (n))
#define USB_BUF(n)  ((volatile uint8_t *)(uintptr_t)(USB_BASE + 0x100u + 0x40u * (n)))

#define USB_CTRL_CONNECT 1u
#define USB_IS_RESET     (1u << 0)
#define USB_IS_SOF       (1u << 1)
#define USB_IS_PIPE(n)   (1u << (8u + (n)))
#define USB_P_COUNT      0x7Fu
#define USB_P_ARM        (1u << 8)
#define USB_P_STALL      (1u << 9)
#define USB_P_SETUP      (1u << 10)

#define PIPE_EP0_OUT 0u
#define PIPE_EP0_IN  1u
#define PIPE_BULK_OUT 2u
#define PIPE_BULK_IN 3u
#define PIPE_INTR_IN 4u

#define USBD_MSG_MAX 1600u      /* dwMaxCCIDMessageLength */

extern uint8_t usbd_msg[USBD_MSG_MAX];
extern volatile uint32_t usbd_msg_len;     /* bytes of the message received */
extern volatile uint32_t usbd_msg_ready;   /* 1: a whole message (or a bad one) waits */
extern volatile uint32_t usbd_msg_error;   /* 0, or 1 = truncated, 2 = longer than the buffer */
extern volatile uint32_t usbd_configured;
extern volatile uint32_t usbd_sofs;        /* SOFs seen while busy */

void usbd_init(void);
/* Send len bytes (a zero-length packet ends a multiple of 64); returns at once. */
void usbd_send(const uint8_t *data, uint32_t len);
uint32_t usbd_tx_busy(void);
void usbd_wait_tx(void);    /* sleep until the reply has gone */
void usbd_wait_msg(void);   /* sleep until a message waits in usbd_msg */
/* Done with usbd_msg: take the next message. */
void usbd_release(void);
/* SOF interrupts while on (the CCID layer's time extensions). */
void usbd_busy(uint32_t on);
/* Called from the USB interrupt on each SOF while busy (defined by the class). */
void ccid_on_sof(void);
/* Send the slot-change notification on the interrupt endpoint. */
void usbd_notify(const uint8_t *data, uint32_t len);

#endif
