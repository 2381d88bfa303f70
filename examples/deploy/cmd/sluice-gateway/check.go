package main

import (
	"fmt"
	"io"
	"log/slog"

	"github.com/sluicegate/sluice/examples/deploy/config"
)

// checkConfig is -check-config: it builds the gateway as a start would —
// the file and the flags, the gate, the controller, the scraper and the
// handler — and prints what it would run with the file's warnings, then
// tears it down without listening, scraping or serving. It returns
// config.CheckOK, or config.CheckInvalid with the problem on stderr.
func checkConfig(opts options, stdout, stderr io.Writer) int {
	g, err := newGateway(opts, slog.New(slog.DiscardHandler))
	if err != nil {
		fmt.Fprintf(stderr, "sluice-gateway: %v\n", err)
		return config.CheckInvalid
	}
	g.fc.Close()
	s := g.cur
	e := config.Effective{
		Binary:     "sluice-gateway",
		ConfigPath: opts.configPath,
		Listen:     [][2]string{{"http", s.listen}},
		Running:    s.running(),
		Warnings:   config.WarningStrings(s.file.Warnings),
	}
	if opts.configPath != "" {
		e.Form = s.file.Form
	}
	if err := e.Write(stdout); err != nil {
		fmt.Fprintf(stderr, "sluice-gateway: %v\n", err)
		return 1
	}
	return config.CheckOK
}
