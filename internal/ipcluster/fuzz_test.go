package ipcluster

import (
	"encoding/json"
	"testing"
)

func FuzzParseStatus(f *testing.F) {
	f.Add([]byte(seedConnReply), []byte(seedQueueReply))
	f.Add([]byte(`{"status":"ok","engines":{}}`), []byte(`{"status":"ok","unassigned":0}`))
	f.Fuzz(func(t *testing.T, conn, queue []byte) {
		st, err := parseStatus(json.RawMessage(conn), json.RawMessage(queue))
		if err != nil {
			return
		}
		if st.Unassigned < 0 {
			t.Errorf("unassigned %d", st.Unassigned)
		}
		for i, e := range st.Engines {
			if i > 0 && st.Engines[i-1].ID >= e.ID {
				t.Errorf("engines %+v not by distinct IDs", st.Engines)
			}
			if e.ID < 0 || e.Queue < 0 || e.Tasks < 0 || e.Completed < 0 {
				t.Errorf("engine %+v", e)
			}
		}
	})
}

func FuzzZMTPLimit(f *testing.F) {
	handshake := append(zmtpGreeting(), zmtpReady()...)
	f.Add(append(handshake, zmtpMessage()...), uint16(7))
	f.Add(append(handshake, zmtpLongFrameHeader(0, 1<<40)...), uint16(1))
	f.Fuzz(func(t *testing.T, data []byte, chunk uint16) {
		// However the stream is cut into reads, the limit decides the same.
		whole := scanInChunks(data, len(data)+1)
		cut := scanInChunks(data, max(int(chunk), 1))
		if (whole == nil) != (cut == nil) {
			t.Errorf("at once: %v; in chunks of %d: %v", whole, chunk, cut)
		}
	})
}
