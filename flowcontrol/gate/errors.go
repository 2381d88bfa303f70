package gate

import "fmt"

// configError returns the error for a bad configuration value: the field,
// the llm-d-router parameter it mirrors (if any), the value and the problem.
func configError(field, llmd string, value any, problem string) error {
	if llmd != "" {
		return fmt.Errorf("gate: %s (llm-d %s) %v: %s", field, llmd, value, problem)
	}
	return fmt.Errorf("gate: %s %v: %s", field, value, problem)
}
