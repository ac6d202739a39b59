# rlserver — see README.md. `make help` lists the targets.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -s -w -X main.version=$(VERSION)
GO ?= go

.PHONY: help build run test test-short bench bench-compare lint docker clean

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-14s %s\n", $$1, $$2}'

build: ## build a static bin/rlserver
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o bin/rlserver ./cmd/rlserver

run: build ## start one node: RESP on 127.0.0.1:6379, HTTP on 127.0.0.1:8080, data in ./data
	./bin/rlserver

test: ## run every test with the race detector (needs redis-server and redis-cli: see .ci/run)
	$(GO) vet ./...
	$(GO) test -race -count=1 -timeout 30m ./...
	RLSERVER_TEST_IOLOOPS=-1 $(GO) test -race -count=1 -timeout 10m ./server  # again, a goroutine per connection

test-short: ## the tests without the race detector
	$(GO) test -count=1 ./...

bench: ## Go benchmarks of the hot path (engine, shards, server)
	$(GO) test -run '^$$' -bench . -benchmem ./engine ./shards ./server

bench-compare: build ## rlserver vs redis-server side by side (needs redis-server, redis-benchmark); writes bench/results/
	$(GO) run ./bench/cmd/benchcompare -rlserver bin/rlserver -luaref luaref -out bench/results $(BENCHFLAGS)

lint: ## gofmt and go vet
	@test -z "$$(gofmt -l .)" || (gofmt -l . && echo "gofmt needed" && exit 1)
	$(GO) vet ./...

docker: build ## build the rlserver image FROM scratch around bin/rlserver
	docker build -t rlserver:$(VERSION) -t rlserver:latest .

clean: ## remove build output
	rm -rf bin
