package long_test

import (
	"fmt"
	"os"

	"github.com/sluicegate/sluice/examples/internal/long"
)

// A simulation's test picks its seeds from Enabled: all of them when
// SLUICE_LONG is set, as .ci/run sets it, and a few otherwise.
func ExampleEnabled() {
	old, had := os.LookupEnv(long.Var)
	defer func() {
		if had {
			os.Setenv(long.Var, old)
		} else {
			os.Unsetenv(long.Var)
		}
	}()
	seeds := func() int {
		if long.Enabled() {
			return 20
		}
		return 3
	}
	os.Unsetenv(long.Var)
	fmt.Println("default:", seeds())
	os.Setenv(long.Var, "1")
	fmt.Println(long.Var+"=1:", seeds())
	// Output:
	// default: 3
	// SLUICE_LONG=1: 20
}
