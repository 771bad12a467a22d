package topic

import (
	"strings"
	"testing"
)

// Standard MurmurHash3 x86_32 vectors (SMHasher reference implementation).
func TestMurmur3Vectors(t *testing.T) {
	for _, tt := range []struct {
		in   string
		seed uint32
		want uint32
	}{
		{"", 0, 0},
		{"", 1, 0x514e28b7},
		{"", 0xffffffff, 0x81f16f39},
		{"\xff\xff\xff\xff", 0, 0x76293b50},
		{"\x21\x43\x65\x87", 0, 0xf55b516b},
		{"\x21\x43\x65\x87", 0x5082edee, 0x2362f9de},
		{"\x21\x43\x65", 0, 0x7e4a8634},
		{"\x21\x43", 0, 0xa0f7b07a},
		{"\x21", 0, 0x72661cf4},
		{"\x00\x00\x00\x00", 0, 0x2362f9de},
		{"\x00\x00\x00", 0, 0x85f0b427},
		{"\x00\x00", 0, 0x30f4c306},
		{"\x00", 0, 0x514e28b7},
		{"aaaa", 0x9747b28c, 0x5a97808a},
		{"aaa", 0x9747b28c, 0x283e0130},
		{"aa", 0x9747b28c, 0x5d211726},
		{"a", 0x9747b28c, 0x7fa09ea6},
		{"abcd", 0x9747b28c, 0xf0478627},
		{"abc", 0x9747b28c, 0xc84a62dd},
		{"ab", 0x9747b28c, 0x74875592},
		{"Hello, world!", 0x9747b28c, 0x24884cba},
		{"ππππππππ", 0x9747b28c, 0xd58063c1},
		{strings.Repeat("a", 256), 0x9747b28c, 0x37405bdc},
		{"abc", 0, 0xb3dd93fa},
		{"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", 0, 0xee925b90},
		{"The quick brown fox jumps over the lazy dog", 0x9747b28c, 0x2fa826cd},
		// Random inputs, checked against an independent implementation.
		{"\x45\x5e\x93\xaa\x56\x93\xcc\x6d\x1f\x23\x6f\x75\x65\xee\xa7\xcd\xc6\x1f\x6a\x7f\x85\x34\x65\x9e\xb1\xb7\xbf\x76\xe4\x40\x4c\x4e\x1d\xce\x17", 0, 0xd514806d},
		{"\xf5\x50\x25\x47\x49\x0a\xe2\xbe\x21\x63\xf1\x89", 14, 0xe3e002f7},
		{"\x58\xb1\x2a\x21\x92\x53", 21, 0xb3c04558},
	} {
		if got := Murmur3([]byte(tt.in), tt.seed); got != tt.want {
			t.Errorf("Murmur3(%q, 0x%08x) = 0x%08x, want 0x%08x", tt.in, tt.seed, got, tt.want)
		}
	}
}
