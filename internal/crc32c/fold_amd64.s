//go:build amd64 && !purego

#include "textflag.h"

// The folding constants, in the bit-reflected form the instruction takes:
// bitrev32(x^e mod P) << 1 for P the CRC-32C polynomial 0x1EDC6F41 and e
// as named. Multiplying a block's low (earlier) and high quadwords by
// them moves the block forward by the fold's distance modulo P: 512 bits
// for the four-block loop, 128 bits to merge blocks. TestFoldConstants
// computes them again.
DATA fold512<>+0(SB)/8, $0x740eef02  // e = 4*128+32
DATA fold512<>+8(SB)/8, $0x9e4addf8  // e = 4*128-32
GLOBL fold512<>(SB), RODATA, $16
DATA fold128<>+0(SB)/8, $0xf20c0dfe  // e = 128+32
DATA fold128<>+8(SB)/8, $0x14cd00bd6 // e = 128-32
GLOBL fold128<>(SB), RODATA, $16

// FOLD moves block B forward over the fold distance whose constants are
// in K and adds block D to it; T is scratch.
#define FOLD(K, B, D, T) \
	MOVOA     B, T; \
	PCLMULQDQ $0x00, K, B; \
	PCLMULQDQ $0x11, K, T; \
	PXOR      T, B; \
	PXOR      D, B

// func fold(crc uint32, p []byte, x *[16]byte)
TEXT ·fold(SB), NOSPLIT, $0-40
	MOVL  crc+0(FP), X0
	MOVQ  p_base+8(FP), SI
	MOVQ  p_len+16(FP), CX
	MOVQ  x+32(FP), DI

	// Four blocks in flight, the CRC added to the first.
	MOVOU 0(SI), X1
	MOVOU 16(SI), X2
	MOVOU 32(SI), X3
	MOVOU 48(SI), X4
	PXOR  X0, X1
	ADDQ  $64, SI
	SUBQ  $64, CX

	MOVOU fold512<>(SB), X0
	CMPQ  CX, $64
	JB    merge

loop64:
	MOVOU 0(SI), X9
	MOVOU 16(SI), X10
	MOVOU 32(SI), X11
	MOVOU 48(SI), X12
	FOLD(X0, X1, X9, X5)
	FOLD(X0, X2, X10, X6)
	FOLD(X0, X3, X11, X7)
	FOLD(X0, X4, X12, X8)
	ADDQ  $64, SI
	SUBQ  $64, CX
	CMPQ  CX, $64
	JAE   loop64

merge:
	// The four blocks into one, then the remaining blocks one by one.
	MOVOU fold128<>(SB), X0
	FOLD(X0, X1, X2, X5)
	FOLD(X0, X1, X3, X5)
	FOLD(X0, X1, X4, X5)

loop16:
	CMPQ  CX, $16
	JB    done
	MOVOU 0(SI), X2
	FOLD(X0, X1, X2, X5)
	ADDQ  $16, SI
	SUBQ  $16, CX
	JMP   loop16

done:
	MOVOU X1, 0(DI)
	RET
