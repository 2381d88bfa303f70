package config

import (
	"errors"
	"log/slog"
	"strings"
)

// ErrNoConfigFile is Reload's error when the binary runs without a file.
var ErrNoConfigFile = errors.New("no -config file to reload")

// Reload reloads the configuration file at path through apply, which reads
// it again and applies all of it or none — returning the changes it made,
// for the log, and the file's warnings — or returns why not, the running
// configuration staying. Reload then calls record, if not nil, with
// apply's error, and logs the outcome, in that order, so that whoever reads
// the log line finds the outcome recorded. Path "" is ErrNoConfigFile,
// logged as a warning: apply and record are not called.
func Reload(log *slog.Logger, path string, apply func() (changes, warnings []string, err error), record func(error)) error {
	if path == "" {
		log.Warn("SIGHUP: " + ErrNoConfigFile.Error())
		return ErrNoConfigFile
	}
	changes, warnings, err := apply()
	if record != nil {
		record(err)
	}
	if err != nil {
		log.Error("configuration reload refused; the running configuration stays", "file", path, "error", err)
		return err
	}
	if len(changes) == 0 {
		changes = []string{"none"}
	}
	log.Info("configuration reloaded", "file", path, "changes", strings.Join(changes, "; "))
	for _, w := range warnings {
		log.Warn("configuration", "warning", w)
	}
	return nil
}
