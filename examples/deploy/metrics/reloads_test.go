package metrics

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestReloads(t *testing.T) {
	r := NewReloads("sluice_test")
	check := func(success, failure, last int) {
		t.Helper()
		want := fmt.Sprintf(`
# HELP sluice_test_config_last_reload_successful 1 if the last configuration reload succeeded (or none was tried), 0 if it failed.
# TYPE sluice_test_config_last_reload_successful gauge
sluice_test_config_last_reload_successful %d
# HELP sluice_test_config_reloads_total Configuration reloads on SIGHUP, by result: success, or failure (the running configuration stayed).
# TYPE sluice_test_config_reloads_total counter
sluice_test_config_reloads_total{result="failure"} %d
sluice_test_config_reloads_total{result="success"} %d
`, last, failure, success)
		if err := testutil.CollectAndCompare(r, strings.NewReader(want)); err != nil {
			t.Error(err)
		}
	}
	check(0, 0, 1) // both results exported before any reload
	r.Record(errors.New("bad file"))
	check(0, 1, 0)
	r.Record(nil)
	check(1, 1, 1)
}
