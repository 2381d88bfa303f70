package flowcontrol

import (
	"math"
	"strings"
	"testing"
)

// TestOutcomesFitTheSettledByte guards waiterUse.settled, the byte a waiter
// keeps its Outcome in: every outcome, up to the first that String does not
// name, must survive the round trip through it.
func TestOutcomesFitTheSettledByte(t *testing.T) {
	for o := Outcome(0); !strings.HasPrefix(o.String(), "Outcome("); o++ {
		var w waiterUse
		w.settled = uint8(o)
		if o > math.MaxUint8 || w.outcome() != o {
			t.Fatalf("%v (%d) does not fit waiterUse.settled", o, int(o))
		}
	}
}
