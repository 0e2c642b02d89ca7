package jpclient

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Execution gathers what the kernel answers to one request: its reply and its iopub
// messages.
type Execution struct {
	MsgID string
	// Reply is the content of the reply on shell (or control); ReplyType its msg_type.
	Reply     map[string]any
	ReplyType string
	// Idle is set by the iopub status "idle" that ends the request.
	Idle bool
	// Stdout, Stderr: the request's stream outputs, concatenated.
	Stdout, Stderr strings.Builder
	// Result is the text/plain of its execute_result; Ename the name of its iopub error.
	Result, Ename string
	// IOPub are the types of the request's iopub messages in order, a status with its
	// state ("status:busy").
	IOPub []string
}

// NewExecution gathers the answers to the request msgID.
func NewExecution(msgID string) *Execution { return &Execution{MsgID: msgID} }

// Finished: the reply and the idle status have both arrived.
func (e *Execution) Finished() bool { return e.Reply != nil && e.Idle }

// Replied: the reply arrived.
func (e *Execution) Replied() bool { return e.Reply != nil }

// WentIdle: the idle status arrived.
func (e *Execution) WentIdle() bool { return e.Idle }

// Status is the reply's "status": ok, error or aborted.
func (e *Execution) Status() string {
	s, _ := e.Reply["status"].(string)
	return s
}

// ErrorName is the name of the request's error as its iopub error message gives it. When
// IPython failed to format the traceback (stack_data's NotOneValueFound, as for a
// KeyboardInterrupt raised at line 0), it prints a fallback instead of sending that message;
// then the reply's ename is all there is.
func (e *Execution) ErrorName() string {
	if e.Ename == "" && strings.Contains(e.Stdout.String(), "Unexpected exception formatting exception") {
		name, _ := e.Reply["ename"].(string)
		return name
	}
	return e.Ename
}

// Add takes in one message if it answers e's request.
func (e *Execution) Add(m *Msg) error {
	if m.ParentHeader.MsgID != e.MsgID {
		return nil
	}
	var content map[string]any
	if err := json.Unmarshal(m.Content, &content); err != nil {
		return fmt.Errorf("%s content %.200q: %w", m.Header.MsgType, m.Content, err)
	}
	switch m.Channel {
	case "shell", "control":
		e.Reply, e.ReplyType = content, m.Header.MsgType
	case "iopub":
		kind := m.Header.MsgType
		if kind == "status" {
			kind += ":" + fmt.Sprint(content["execution_state"])
		}
		e.IOPub = append(e.IOPub, kind)
		switch m.Header.MsgType {
		case "status":
			if content["execution_state"] == "idle" {
				e.Idle = true
			}
		case "stream":
			text, _ := content["text"].(string)
			if content["name"] == "stderr" {
				e.Stderr.WriteString(text)
			} else {
				e.Stdout.WriteString(text)
			}
		case "execute_result":
			data, _ := content["data"].(map[string]any)
			e.Result, _ = data["text/plain"].(string)
		case "error":
			e.Ename, _ = content["ename"].(string)
		}
	}
	return nil
}

// String shows an execution in failure messages.
func (e *Execution) String() string {
	return fmt.Sprintf("%s %v, result %q, error %q, stdout %q, stderr %q, iopub %v", e.ReplyType, e.Reply, e.Result, e.Ename, e.Stdout.String(), e.Stderr.String(), e.IOPub)
}

// Until gives each message read to on until on says it is done or fails, the deadline
// passes (ErrTimeout) or the connection ends (ErrEnded).
func (c *Conn) Until(deadline time.Time, on func(*Msg) (done bool, err error)) error {
	for {
		m, err := c.Next(deadline)
		if err != nil {
			return err
		}
		if done, err := on(m); done || err != nil {
			return err
		}
	}
}

// Await reads messages into e until done(e), the deadline or the connection's end.
func (c *Conn) Await(e *Execution, deadline time.Time, done func(*Execution) bool) error {
	return c.await(e, deadline, done, nil)
}

// await is Await with see, when not nil, shown every message read, the request's or not.
func (c *Conn) await(e *Execution, deadline time.Time, done func(*Execution) bool, see func(*Msg)) error {
	if done(e) {
		return nil
	}
	err := c.Until(deadline, func(m *Msg) (bool, error) {
		if see != nil {
			see(m)
		}
		if err := e.Add(m); err != nil {
			return false, err
		}
		return done(e), nil
	})
	if err != nil {
		return fmt.Errorf("%w; so far: %s (idle %t)", err, e, e.Idle)
	}
	return nil
}

// Execute runs code (stop_on_error false) and waits up to timeout for its reply and the
// kernel's return to idle; see, when not nil, is shown every message read meanwhile. The
// Execution is what came, also when the error says that not all of it did.
func (c *Conn) Execute(code string, timeout time.Duration, see func(*Msg)) (*Execution, error) {
	id, err := c.SendExecute(code, false)
	if err != nil {
		return nil, err
	}
	e := NewExecution(id)
	if err := c.await(e, time.Now().Add(timeout), (*Execution).Finished, see); err != nil {
		return e, fmt.Errorf("executing %.200q: %w", code, err)
	}
	return e, nil
}

// Drain reads what is left into e (when not nil) until the connection ends; ErrTimeout when
// it did not end by the deadline.
func (c *Conn) Drain(e *Execution, deadline time.Time) error {
	err := c.Until(deadline, func(m *Msg) (bool, error) {
		if e == nil {
			return false, nil
		}
		return false, e.Add(m)
	})
	if errors.Is(err, ErrEnded) {
		return nil
	}
	return err
}

// KernelInfo asks for kernel_info on shell until the kernel answers or the deadline passes.
// It asks again every retry (with ReadAhead; zero asks once): on a new connection and
// after a restart a request may get no answer (Jupyter Server's gateway relay may drop a
// new connection's first messages; a kernel process being replaced answers nothing).
func (c *Conn) KernelInfo(deadline time.Time, retry time.Duration) error {
	asked := map[string]bool{}
	for {
		id, err := c.Send("shell", "kernel_info_request", struct{}{})
		if err != nil {
			return err
		}
		asked[id] = true
		until := deadline
		// Without ReadAhead a timeout ends the connection: no asking again.
		if retry > 0 && c.in != nil && time.Now().Add(retry).Before(deadline) {
			until = time.Now().Add(retry)
		}
		err = c.Until(until, func(m *Msg) (bool, error) {
			return m.Header.MsgType == "kernel_info_reply" && asked[m.ParentHeader.MsgID], nil
		})
		if !errors.Is(err, ErrTimeout) || !time.Now().Before(deadline) {
			if err != nil {
				return fmt.Errorf("kernel_info: %w", err)
			}
			return nil
		}
	}
}

// KernelPID is the process id of a Python kernel (ipykernel), as the kernel tells it.
func (c *Conn) KernelPID(timeout time.Duration) (int, error) {
	e, err := c.Execute("import os; os.getpid()", timeout, nil)
	if err != nil {
		return 0, err
	}
	pid, err := strconv.Atoi(e.Result)
	if err != nil {
		return 0, fmt.Errorf("os.getpid(): %s", e)
	}
	return pid, nil
}
