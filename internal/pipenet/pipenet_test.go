package pipenet_test

import (
	"context"
	"errors"
	"io"
	"net"
	"testing"
	"testing/synctest"

	"github.com/sluicegate/sluice/internal/pipenet"
)

func TestDialAcceptExchange(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := pipenet.Listen()
		defer l.Close()
		go func() {
			c, err := l.Accept()
			if err != nil {
				t.Error(err)
				return
			}
			defer c.Close()
			io.Copy(c, c) // echo
		}()
		c, err := l.DialAddr(context.Background(), "anything")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Write([]byte("ping")); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 4)
		if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "ping" {
			t.Fatalf("echo = %q, %v; want ping", buf, err)
		}
		c.Close()
	})
}

func TestClosedListenerRefuses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := pipenet.Listen()
		l.Close()
		l.Close() // idempotent
		if _, err := l.Accept(); !errors.Is(err, net.ErrClosed) {
			t.Fatalf("Accept after Close: %v, want net.ErrClosed", err)
		}
		if _, err := l.Dial(context.Background(), "tcp", "x"); !errors.Is(err, net.ErrClosed) {
			t.Fatalf("Dial after Close: %v, want net.ErrClosed", err)
		}
	})
}

// A Dial nobody accepts waits — durably, so the fake clock can end it by
// its context's deadline.
func TestDialWaitsForAcceptUntilContextEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := pipenet.Listen()
		defer l.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 1)
		defer cancel()
		if _, err := l.Dial(ctx, "tcp", "x"); !errors.Is(err, net.ErrClosed) {
			t.Fatalf("Dial with no Accept: %v, want net.ErrClosed", err)
		}
		if l.Addr().Network() != "pipe" || l.Addr().String() != "pipe" {
			t.Fatalf("Addr = %v/%v", l.Addr().Network(), l.Addr())
		}
	})
}

// Both peers may write before either reads, as over a socket; over a bare
// net.Pipe the first write would wait for a read that never comes.
func TestBothPeersWriteBeforeReading(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := pipenet.Listen()
		defer l.Close()
		accepted := make(chan net.Conn)
		go func() {
			c, err := l.Accept()
			if err != nil {
				t.Error(err)
			}
			accepted <- c
		}()
		client, err := l.Dial(context.Background(), "tcp", "x")
		if err != nil {
			t.Fatal(err)
		}
		server := <-accepted
		for _, c := range []net.Conn{client, server} {
			for range 3 {
				if _, err := c.Write([]byte("hello")); err != nil {
					t.Fatal(err)
				}
			}
		}
		for _, c := range []net.Conn{client, server} {
			buf := make([]byte, 15)
			if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "hellohellohello" {
				t.Fatalf("read %q, %v", buf, err)
			}
		}
		// Closing one end ends the other's reads, and the relays return
		// (synctest.Test fails if any goroutine is left).
		client.Close()
		if _, err := server.Read(make([]byte, 1)); err != io.EOF {
			t.Fatalf("read after the peer closed: %v, want io.EOF", err)
		}
		server.Close()
	})
}
