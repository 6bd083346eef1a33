package main

import "hash/crc32"

var tab = crc32.MakeTable(crc32.Castagnoli)

func crc32c(b []byte) uint32 { return crc32.Checksum(b, tab) }
