package flowhttp_test

import (
	"testing"

	"github.com/sluicegate/sluice/internal/testhttp"
)

// TestMain fails the run if the tests leave a goroutine behind: a handler
// stuck in EnqueueAndWait, a server or a client connection nobody closed.
func TestMain(m *testing.M) { testhttp.Main(m) }
