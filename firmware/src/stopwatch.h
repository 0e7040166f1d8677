/*
 * A millisecond stopwatch on SysTick, the way the xRSA paper timed its operations
 * (IV-B: SysTick from the 48 MHz clock, 1 ms resolution). It owns SysTick_Handler,
 * so only images that do not use SysTick otherwise link it.
 */
#ifndef PKASIM_STOPWATCH_H
#define PKASIM_STOPWATCH_H

#include <stdint.h>

/* The core clock SysTick counts (CMSIS's SystemCoreClock): 48 MHz on the CIU98320B.
 * It lives in .data, so a harness running the image on another clock sets it
 * (pkasim bench does, through the ELF symbol). */
extern uint32_t core_clock_hz;

void stopwatch_start(void);     /* 1 ms ticks from now */
uint32_t stopwatch_stop(void);  /* stops SysTick; the whole milliseconds elapsed */

#endif
