package extproc_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the run if the tests leave a goroutine behind: a stream,
// a gRPC server or a connection nobody ended.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
