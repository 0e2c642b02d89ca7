package wire

import "testing"

// The relay's hot path is kernel → client: DecodeZMQ, then EncodeJSON or EncodeV1, for every
// iopub message. The benchmarks use a typical stream output (about 0.5 KB of dicts).

func BenchmarkDecodeZMQ(b *testing.B) {
	s := NewSigner([]byte("a0b1c2d3-e4f5-6789-abcd-ef0123456789"))
	frames := EncodeZMQ(streamMessage(), s)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DecodeZMQ(frames, s, Limits{}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEncodeZMQ(b *testing.B) {
	s := NewSigner([]byte("a0b1c2d3-e4f5-6789-abcd-ef0123456789"))
	m := streamMessage()
	b.ReportAllocs()
	for b.Loop() {
		EncodeZMQ(m, s)
	}
}

func BenchmarkEncodeJSON(b *testing.B) {
	m := wsMessage()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := EncodeJSON(m); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEncodeV1(b *testing.B) {
	m := wsMessage()
	b.ReportAllocs()
	for b.Loop() {
		EncodeV1(m)
	}
}

// Client → kernel, the other direction.
func BenchmarkDecodeJSON(b *testing.B) {
	data, err := EncodeJSON(wsMessage())
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DecodeJSON(data, Limits{}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeV1(b *testing.B) {
	data := EncodeV1(wsMessage())
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DecodeV1(data, Limits{}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkParseHeader(b *testing.B) {
	h := streamMessage().Header
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseHeader(h); err != nil {
			b.Fatal(err)
		}
	}
}
