// Package ipcluster is what nbkube knows of ipyparallel: the connection files of a cluster
// with fixed ports, and a client of the ipcontroller's hub that asks which engines are
// registered and how busy they are. The facts behind it, measured with ipyparallel 7.1, are in
// docs/ipyparallel.md.
package ipcluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// The ports of a cluster's ipcontroller, in the order ipcontroller itself allocates them from
// a pool starting at RegistrationPort (docs/ipyparallel.md, "Port order"). Fixed ports let a
// Service expose them and let the connection files be written before anything runs.
const (
	// RegistrationPort is where engines register and clients (and nbkube) query the hub.
	RegistrationPort = 10101

	engineControl, engineMux, engineTask, engineIOPub = 10102, 10103, 10104, 10105
	engineHBPing, engineHBPong                        = 10106, 10107
	engineBroadcast0, engineBroadcast1                = 10108, 10109

	clientControl, clientMux, clientTask, clientIOPub = 10110, 10111, 10112, 10113
	clientNotification, clientBroadcast               = 10114, 10115
)

// ServicePorts are the ports engines and clients connect to, which a Service must expose:
// registration, the engines' eight and the clients' six. ipcontroller's internal ports
// (schedulers, monitor) are left out, and random.
func ServicePorts() []int32 {
	ports := make([]int32, 0, clientBroadcast-RegistrationPort+1)
	for p := int32(RegistrationPort); p <= clientBroadcast; p++ {
		ports = append(ports, p)
	}
	return ports
}

// Connection is what the connection files say besides the fixed ports.
type Connection struct {
	// Key signs every message (HMAC-SHA256): printable ASCII without spaces, so that it
	// reads the same from a --keyfile, which ipcontroller strips, as from the JSON files.
	Key string
	// Interface is "tcp://<address>": where ipcontroller binds, in its own copies, and where
	// engines and clients connect, in theirs (a host name works there).
	Interface string
	// Location is the ipcontroller's host as others see it; ipyparallel reads it only when
	// Interface is tcp://0.0.0.0 or tcp://*.
	Location string
}

func (c Connection) validate() error {
	if c.Key == "" {
		return errors.New("connection file: empty key")
	}
	for _, r := range c.Key {
		if r < 0x21 || r > 0x7e {
			return errors.New("connection file: the key must be printable ASCII")
		}
	}
	host, ok := strings.CutPrefix(c.Interface, "tcp://")
	if !ok || host == "" || strings.ContainsAny(host, ":/ ") {
		return fmt.Errorf("connection file: interface %q is not tcp://<address>", c.Interface)
	}
	return nil
}

// engineFile is ipcontroller-engine.json, its keys in ipcontroller's order.
type engineFile struct {
	SSH             string  `json:"ssh"`
	Interface       string  `json:"interface"`
	Registration    int     `json:"registration"`
	Control         int     `json:"control"`
	Mux             int     `json:"mux"`
	Task            int     `json:"task"`
	IOPub           int     `json:"iopub"`
	HBPing          int     `json:"hb_ping"`
	HBPong          int     `json:"hb_pong"`
	Broadcast       [2]int  `json:"broadcast"`
	Key             string  `json:"key"`
	CurveServerKey  *string `json:"curve_serverkey"`
	Location        string  `json:"location"`
	Pack            string  `json:"pack"`
	Unpack          string  `json:"unpack"`
	SignatureScheme string  `json:"signature_scheme"`
}

// clientFile is ipcontroller-client.json, its keys in ipcontroller's order.
type clientFile struct {
	SSH             string  `json:"ssh"`
	Interface       string  `json:"interface"`
	Registration    int     `json:"registration"`
	Control         int     `json:"control"`
	Mux             int     `json:"mux"`
	Task            int     `json:"task"`
	TaskScheme      string  `json:"task_scheme"`
	IOPub           int     `json:"iopub"`
	Notification    int     `json:"notification"`
	Broadcast       int     `json:"broadcast"`
	Key             string  `json:"key"`
	CurveServerKey  *string `json:"curve_serverkey"`
	Location        string  `json:"location"`
	Pack            string  `json:"pack"`
	Unpack          string  `json:"unpack"`
	SignatureScheme string  `json:"signature_scheme"`
}

// The serialization ipcontroller applies from the files is the key only: these must be what
// it uses anyway.
const (
	packer          = "json"
	signatureScheme = "hmac-sha256"
)

// EngineFile is ipcontroller-engine.json for c, as ipcontroller writes it.
func EngineFile(c Connection) ([]byte, error) {
	if err := c.validate(); err != nil {
		return nil, err
	}
	return json.MarshalIndent(engineFile{
		Interface: c.Interface, Registration: RegistrationPort,
		Control: engineControl, Mux: engineMux, Task: engineTask, IOPub: engineIOPub,
		HBPing: engineHBPing, HBPong: engineHBPong, Broadcast: [2]int{engineBroadcast0, engineBroadcast1},
		Key: c.Key, Location: c.Location, Pack: packer, Unpack: packer, SignatureScheme: signatureScheme,
	}, "", "  ")
}

// ClientFile is ipcontroller-client.json for c, as ipcontroller writes it.
func ClientFile(c Connection) ([]byte, error) {
	if err := c.validate(); err != nil {
		return nil, err
	}
	return json.MarshalIndent(clientFile{
		Interface: c.Interface, Registration: RegistrationPort,
		Control: clientControl, Mux: clientMux, Task: clientTask, TaskScheme: "leastload", IOPub: clientIOPub,
		Notification: clientNotification, Broadcast: clientBroadcast,
		Key: c.Key, Location: c.Location, Pack: packer, Unpack: packer, SignatureScheme: signatureScheme,
	}, "", "  ")
}
