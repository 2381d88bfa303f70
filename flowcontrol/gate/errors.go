package gate

import (
	"fmt"
	"time"
)

// configError returns the error for a bad configuration value: the field,
// the llm-d-router parameter it mirrors (if any), the value and the problem.
func configError(field, llmd string, value any, problem string) error {
	if llmd != "" {
		return fmt.Errorf("gate: %s (llm-d %s) %v: %s", field, llmd, value, problem)
	}
	return fmt.Errorf("gate: %s %v: %s", field, value, problem)
}

// orDefault returns v, or def when v is 0; a negative v is a configuration
// error naming the field, the llm-d-router parameter it mirrors and def.
func orDefault[T int | int64 | time.Duration](field, llmd string, v, def T) (T, error) {
	switch {
	case v < 0:
		return 0, configError(field, llmd, v, fmt.Sprintf("negative; 0 means the default %v", def))
	case v == 0:
		return def, nil
	}
	return v, nil
}
