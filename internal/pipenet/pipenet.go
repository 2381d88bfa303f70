// Package pipenet is an in-memory network for tests that run servers inside
// a testing/synctest bubble: a [Listener] whose connections are net.Pipe
// pairs.
//
// A socket blocks in the network poller, which synctest cannot see into, so
// a bubble with an idle loopback connection never counts as durably blocked
// and its fake clock stands still. A net.Pipe blocks on channels created in
// the bubble that dialled it, so synctest.Wait returns once every server and
// client goroutine is parked, and time moves on.
package pipenet

import (
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

// Dial connects to the listener and returns the client end of a new pipe.
// It waits for Accept, and fails with net.ErrClosed if the listener closes
// or ctx ends first. The network and address are ignored, so Dial serves as
// an http.Transport's DialContext; [Listener.DialAddr] is the form gRPC's
// WithContextDialer takes.
func (l *Listener) Dial(ctx context.Context, _, _ string) (net.Conn, error) {
	client, server := net.Pipe()
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

// DialAddr is Dial for dialers that pass only an address.
func (l *Listener) DialAddr(ctx context.Context, address string) (net.Conn, error) {
	return l.Dial(ctx, "pipe", address)
}

type addr struct{}

func (addr) Network() string { return "pipe" }
func (addr) String() string  { return "pipe" }
