module github.com/sluicegate/sluice

go 1.25.0

require (
	golang.org/x/exp v0.0.0-20251023183803-a4bb9ffd2546
	golang.org/x/sync v0.22.0
	pgregory.net/rapid v1.3.0
)
