// Package pipenet is an in-memory network for tests that run servers inside
// a testing/synctest bubble: a [Listener] whose connections are buffered
// pipes.
//
// A socket blocks in the network poller, which synctest cannot see into, so
// a bubble with an idle loopback connection never counts as durably blocked
// and its fake clock stands still. A pipe blocks on channels created in the
// bubble that dialled it, so synctest.Wait returns once every server and
// client goroutine is parked, and time moves on.
//
// A bare net.Pipe is not enough: it has no buffer, so a write waits for the
// peer's read. Protocols that stop reading while their own writes are
// pending — HTTP/2 as gRPC implements it throttles its reader when too many
// control frames wait to be written — can then deadlock with both peers
// writing, which a socket's kernel buffers never let happen. Each direction
// of a pipenet connection is two net.Pipes joined by a relay with a buffer
// of [Buffer] writes, so a writer waits only when that much is unread.
package pipenet

import (
	"bytes"
	"context"
	"net"
	"sync"
)

// Listener is a net.Listener served by [Listener.Dial]. Create it with
// [Listen], inside the bubble that will use it. It is safe for concurrent
// use.
type Listener struct {
	conns  chan net.Conn
	closed chan struct{}
	once   sync.Once
}

// Listen returns a new, open Listener.
func Listen() *Listener {
	return &Listener{conns: make(chan net.Conn), closed: make(chan struct{})}
}

// Accept waits for the next Dial and returns the server end of its pipe, or
// net.ErrClosed once the listener is closed.
func (l *Listener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

// Close stops Accept and Dial. Connections already made stay open. Close is
// idempotent.
func (l *Listener) Close() error {
	l.once.Do(func() { close(l.closed) })
	return nil
}

// Addr returns the listener's address, network "pipe".
func (l *Listener) Addr() net.Addr { return addr{} }

// Buffer is how many writes each direction of a connection holds before a
// writer waits for its peer to read.
const Buffer = 4096

// Dial connects to the listener and returns the client end of a new pipe.
// It waits for Accept, and fails with net.ErrClosed if the listener closes
// or ctx ends first. The network and address are ignored, so Dial serves as
// an http.Transport's DialContext; [Listener.DialAddr] is the form gRPC's
// WithContextDialer takes.
func (l *Listener) Dial(ctx context.Context, _, _ string) (net.Conn, error) {
	client, server := bufferedPipe()
	select {
	case l.conns <- server:
		return client, nil
	case <-l.closed:
	case <-ctx.Done():
	}
	client.Close()
	server.Close()
	return nil, net.ErrClosed
}

// bufferedPipe returns the two ends of a connection. Each end is a real
// net.Pipe end, so deadlines and Close behave as net.Pipe's do; behind the
// ends, one relay per direction carries the bytes with a buffer.
func bufferedPipe() (client, server net.Conn) {
	client, clientRelay := net.Pipe()
	serverRelay, server := net.Pipe()
	relay(clientRelay, serverRelay)
	relay(serverRelay, clientRelay)
	return client, server
}

// relay copies what is written to src's peer on to dst's peer, holding up
// to Buffer writes that dst's peer has not read yet. When either side ends,
// it closes both relay ends, so both peers see the connection end, and its
// goroutines return.
func relay(src, dst net.Conn) {
	chunks := make(chan []byte, Buffer)
	go func() {
		defer close(chunks)
		buf := make([]byte, 32<<10)
		for {
			n, err := src.Read(buf)
			if n > 0 {
				chunks <- bytes.Clone(buf[:n])
			}
			if err != nil {
				return
			}
		}
	}()
	go func() {
		for chunk := range chunks {
			if _, err := dst.Write(chunk); err != nil {
				// dst's peer is gone: stop the writer on the other side
				// too, and drain so the reader above can finish.
				src.Close()
				for range chunks {
				}
				break
			}
		}
		dst.Close()
	}()
}

// DialAddr is Dial for dialers that pass only an address.
func (l *Listener) DialAddr(ctx context.Context, address string) (net.Conn, error) {
	return l.Dial(ctx, "pipe", address)
}

type addr struct{}

func (addr) Network() string { return "pipe" }
func (addr) String() string  { return "pipe" }
