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
		Inference:  opts.inference,
		Classifier: opts.classifier,
		Cost:       costOf(opts),
		Warnings:   s.warnings,
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

// costOf says what a request costs under opts, for -check-config.
func costOf(opts options) string {
	if opts.maxBodyBytes < 0 {
		return "1 per request: bodies are not read (-max-body-bytes is negative)"
	}
	return fmt.Sprintf("estimated tokens: the body's bytes / 4 plus its max_completion_tokens or max_tokens, at most %d (-max-tokens); "+
		"a body over %d bytes is answered 413 (-max-body-bytes)", opts.maxTokens, opts.maxBodyBytes)
}
