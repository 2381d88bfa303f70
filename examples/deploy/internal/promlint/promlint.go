// Package promlint runs promtool's linter on a metrics page for the deploy
// module's tests.
package promlint

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
)

// Check runs `promtool check metrics` on page and returns every finding but
// one: promtool reads the "d" of llm-d-router's prefix llm_d_ as an
// abbreviated unit (days) in every llm_d_* name. Those names are
// llm-d-router's, kept so that its dashboards carry over, so that finding
// is allowed for them (promtool then exits 3). It returns an error when
// promtool fails otherwise, or reports findings with exit status 0.
func Check(ctx context.Context, promtool, page string) (findings []string, err error) {
	cmd := exec.CommandContext(ctx, promtool, "check", "metrics")
	cmd.Stdin = strings.NewReader(page)
	out, runErr := cmd.CombinedOutput()
	var exit *exec.ExitError
	if runErr != nil && !(errors.As(runErr, &exit) && exit.ExitCode() == 3) {
		return nil, fmt.Errorf("promtool check metrics: %v\n%s", runErr, out)
	}
	allowed := 0
	for line := range strings.Lines(strings.TrimSpace(string(out))) {
		name, problem, _ := strings.Cut(strings.TrimSpace(line), " ")
		if strings.HasPrefix(name, "llm_d_") && problem == "metric names should not contain abbreviated units" {
			allowed++
			continue
		}
		findings = append(findings, strings.TrimSpace(line))
	}
	if allowed > 0 && runErr == nil {
		return findings, fmt.Errorf("promtool reported %d findings and exit status 0", allowed)
	}
	return findings, nil
}
