package ipcluster

import (
	"bytes"
	"encoding/binary"
	"strings"
	"testing"
)

// zmtpGreeting is the greeting of a ZMTP 3.0 peer with the NULL mechanism, as a server.
func zmtpGreeting() []byte {
	g := make([]byte, greetingLen)
	g[0], g[9], g[10], g[11] = 0xff, 0x7f, 3, 0
	copy(g[12:], "NULL")
	g[32] = 1
	return g
}

// zmtpFrame is a frame with flags and body, its size short or long as the body needs.
func zmtpFrame(flags byte, body []byte) []byte {
	if len(body) > 255 {
		return append(zmtpLongFrameHeader(flags, uint64(len(body))), body...)
	}
	return append([]byte{flags, byte(len(body))}, body...)
}

// zmtpLongFrameHeader is the header of a frame that announces size bytes.
func zmtpLongFrameHeader(flags byte, size uint64) []byte {
	return binary.BigEndian.AppendUint64([]byte{flags | flagLong}, size)
}

// zmtpReady is the NULL mechanism's READY command of a ROUTER socket, like a hub's query socket.
func zmtpReady() []byte {
	const sockType = "ROUTER"
	body := append([]byte{5}, "READY"...)
	body = append(body, byte(len("Socket-Type")))
	body = append(body, "Socket-Type"...)
	body = binary.BigEndian.AppendUint32(body, uint32(len(sockType)))
	return zmtpFrame(flagCommand, append(body, sockType...))
}

// zmtpMessage is a message of three frames, its last one long.
func zmtpMessage() []byte {
	return bytes.Join([][]byte{
		zmtpFrame(flagMore, []byte("<IDS|MSG>")),
		zmtpFrame(flagMore, []byte("signature")),
		zmtpFrame(0, bytes.Repeat([]byte("x"), 300)),
	}, nil)
}

// scanInChunks scans data with a fresh limit, chunk bytes at a time.
func scanInChunks(data []byte, chunk int) error {
	z := zmtpLimit{bytesLeft: connBudget, messagesLeft: maxMessages}
	for len(data) > 0 {
		n := min(chunk, len(data))
		if err := z.scan(data[:n]); err != nil {
			return err
		}
		data = data[n:]
	}
	return nil
}

func TestZMTPLimit_PassesAHandshakeAndMaxMessagesHowEverTheyArrive(t *testing.T) {
	stream := append(zmtpGreeting(), zmtpReady()...)
	for range maxMessages {
		stream = append(stream, zmtpMessage()...)
	}
	for _, chunk := range []int{1, 2, 7, 9, 64, 1000, len(stream)} {
		if err := scanInChunks(stream, chunk); err != nil {
			t.Errorf("in chunks of %d: %v", chunk, err)
		}
		if err := scanInChunks(append(stream, zmtpMessage()...), chunk); err == nil || !strings.Contains(err.Error(), "messages") {
			t.Errorf("in chunks of %d, one message more: %v, want refused", chunk, err)
		}
	}
}

func TestZMTPLimit_RefusesAFrameBeyondTheBudgetFromItsHeader(t *testing.T) {
	prefix := append(zmtpGreeting(), zmtpReady()...)
	// The largest frame that fits: the budget less what came before and the frame's header.
	fits := uint64(connBudget - len(prefix) - 9)
	for _, chunk := range []int{1, 5, 4096} {
		if err := scanInChunks(append(prefix, zmtpLongFrameHeader(0, fits)...), chunk); err != nil {
			t.Errorf("in chunks of %d, a frame of %d bytes: %v", chunk, fits, err)
		}
		for _, size := range []uint64{fits + 1, 1 << 40, 1<<64 - 1} {
			if err := scanInChunks(append(prefix, zmtpLongFrameHeader(0, size)...), chunk); err == nil || !strings.Contains(err.Error(), "budget") {
				t.Errorf("in chunks of %d, a frame of %d bytes: %v, want refused", chunk, size, err)
			}
		}
	}
}

func TestZMTPLimit_RefusesMoreBytesThanTheBudget(t *testing.T) {
	stream := append(zmtpGreeting(), zmtpFrame(flagMore, make([]byte, connBudget-greetingLen-9))...)
	if err := scanInChunks(stream, 1<<16); err != nil {
		t.Fatalf("a stream of exactly the budget: %v", err)
	}
	if err := scanInChunks(append(stream, 0), 1<<16); err == nil {
		t.Error("a byte past the budget: accepted")
	}
}
