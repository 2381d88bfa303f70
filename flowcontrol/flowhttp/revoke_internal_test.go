package flowhttp

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
)

// The writer's three orders, settled by its lock: a revocation before the
// handler finished closes the response (writes fail with the cause) and
// reports whether it had been committed; an informational status does not
// commit it; a revocation after the finish changes nothing.
func TestRevocableWriterOrders(t *testing.T) {
	cause := errors.New("revoked")

	rec := httptest.NewRecorder()
	rw := &revocableWriter{next: rec}
	rw.WriteHeader(http.StatusEarlyHints)
	if !rw.revoke(cause) {
		t.Fatal("revoke before the finish did not take effect")
	}
	if _, err := rw.Write([]byte("late")); err != cause {
		t.Errorf("Write after the revocation: %v, want the cause", err)
	}
	if err := rw.FlushError(); err != cause {
		t.Errorf("FlushError after the revocation: %v, want the cause", err)
	}
	if _, _, err := rw.Hijack(); err != cause {
		t.Errorf("Hijack after the revocation: %v, want the cause", err)
	}
	rw.WriteHeader(http.StatusOK)
	if got, committed := rw.finish(); got != cause || committed {
		t.Errorf("finish after a 103 and a revocation: (%v, %v), want (cause, not committed)", got, committed)
	}
	if rec.Body.Len() != 0 || rec.Code != http.StatusEarlyHints {
		t.Errorf("passed on after the revocation: status %d, body %q", rec.Code, rec.Body)
	}

	rw = &revocableWriter{next: httptest.NewRecorder()}
	if _, err := rw.Write([]byte("tokens")); err != nil {
		t.Fatal(err)
	}
	if !rw.revoke(cause) {
		t.Fatal("revoke before the finish did not take effect")
	}
	if got, committed := rw.finish(); got != cause || !committed {
		t.Errorf("finish after a write and a revocation: (%v, %v), want (cause, committed)", got, committed)
	}

	rec = httptest.NewRecorder()
	rw = &revocableWriter{next: rec}
	if _, err := rw.Write([]byte("whole")); err != nil {
		t.Fatal(err)
	}
	if got, _ := rw.finish(); got != nil {
		t.Fatalf("finish without a revocation: %v", got)
	}
	if rw.revoke(cause) {
		t.Error("revoke after the finish took effect")
	}
	if rw.revokedUnwritten() {
		t.Error("a late revocation reads as revoked")
	}
	if rec.Body.String() != "whole" {
		t.Errorf("body %q, want whole", rec.Body)
	}
}
