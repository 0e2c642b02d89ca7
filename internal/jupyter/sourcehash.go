package jupyter

import (
	"encoding/binary"
	"strconv"
)

// SourceHash is the source_hash of server-side execution (POST /api/kernels/<id>/execute,
// as jupyter-server-documents defines it): MurmurHash2, 32 bits, seed 0, of the source's UTF-8
// bytes, in decimal. A client sends it with each cell it asks to run, so that a cell edited
// since the user pressed Run is not run.
func SourceHash(source string) string {
	const (
		m = 0x5bd1e995
		r = 24
	)
	data := []byte(source)
	h := uint32(len(data)) //nolint:gosec // MurmurHash2 mixes the length in modulo 2^32.
	for len(data) >= 4 {
		k := binary.LittleEndian.Uint32(data)
		k *= m
		k ^= k >> r
		k *= m
		h *= m
		h ^= k
		data = data[4:]
	}
	switch len(data) {
	case 3:
		h ^= uint32(data[2]) << 16
		fallthrough
	case 2:
		h ^= uint32(data[1]) << 8
		fallthrough
	case 1:
		h ^= uint32(data[0])
		h *= m
	}
	h ^= h >> 13
	h *= m
	h ^= h >> 15
	return strconv.FormatUint(uint64(h), 10)
}
