package promlint

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fakePromtool writes a promtool that prints out and exits with code.
func fakePromtool(t *testing.T, out string, code int) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "promtool")
	script := "#!/bin/sh\ncat >/dev/null\nprintf '%s' '" + out + "'\nexit " + string(rune('0'+code)) + "\n"
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestCheck(t *testing.T) {
	const llmd = "llm_d_epp_flow_control_queue_size metric names should not contain abbreviated units\n"
	const other = "sluice_gateway_x counter metrics should have \"_total\" suffix\n"
	ctx := context.Background()

	if f, err := Check(ctx, fakePromtool(t, "", 0), "page"); err != nil || len(f) != 0 {
		t.Errorf("clean page: %v, %v", f, err)
	}
	if f, err := Check(ctx, fakePromtool(t, llmd, 3), "page"); err != nil || len(f) != 0 {
		t.Errorf("only llm-d's prefix: %v, %v; want it allowed", f, err)
	}
	if f, err := Check(ctx, fakePromtool(t, llmd+other, 3), "page"); err != nil || len(f) != 1 || !strings.HasPrefix(f[0], "sluice_gateway_x") {
		t.Errorf("another finding: %v, %v; want it alone", f, err)
	}
	if _, err := Check(ctx, fakePromtool(t, llmd, 0), "page"); err == nil {
		t.Error("findings with exit status 0 passed")
	}
	if _, err := Check(ctx, fakePromtool(t, "boom", 1), "page"); err == nil || !strings.Contains(err.Error(), "boom") {
		t.Errorf("promtool failing: %v", err)
	}
}
