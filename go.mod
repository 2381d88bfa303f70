module github.com/sluicegate/sluice

go 1.25.0

require (
	github.com/google/go-cmp v0.7.0 // indirect
	github.com/stretchr/testify v1.12.1 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
	golang.org/x/exp v0.0.0-20251023183803-a4bb9ffd2546 // indirect
	golang.org/x/sync v0.22.0 // indirect
	pgregory.net/rapid v1.3.0 // indirect
)
