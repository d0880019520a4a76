//go:build !amd64 || purego

package crc32c

const haveFold = false

func fold(crc uint32, p []byte, x *[16]byte) { panic("crc32c: no folding on this architecture") }
