# rlserver — see README.md. `make help` lists the targets.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -s -w -X main.version=$(VERSION)
GO ?= go
# bench-compare writes here; the committed results are bench/results (BENCHOUT=bench/results).
BENCHOUT ?= bench/out
# docker compose v2 if the docker CLI has it, else docker-compose v1.
COMPOSE ?= $(shell docker compose version >/dev/null 2>&1 && echo 'docker compose' || echo docker-compose)

.PHONY: help build run cluster rolling-restart test test-long test-busy test-short bench bench-compare bench-cluster failover flood soak conns lint docker compose compose-down clean

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-16s %s\n", $$1, $$2}'

build: ## build a static bin/rlserver (and bin/data, the image's empty /data)
	@mkdir -p bin/data
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o bin/rlserver ./cmd/rlserver

run: build ## start one node: RESP on 127.0.0.1:6379, HTTP on 127.0.0.1:8080, data in ./data
	./bin/rlserver

cluster: build ## three local nodes of one cluster: RESP 127.0.0.1:7001-7003, HTTP 8001-8003, gRPC (Envoy RLS) 9001-9003, data in ./data/cluster (Ctrl-C stops them)
	./scripts/cluster.sh

rolling-restart: build ## restart make cluster's nodes one by one (SIGTERM, start with --data-dir alone, wait for the leaders): clients see no error
	./scripts/rolling-restart.sh

test: ## run every test with the race detector, every pass even after a failure (needs redis-server and redis-cli: see .ci/run)
	GO=$(GO) ./scripts/test.sh

test-long: ## the long scenarios (30 cluster restarts, 8 container restarts, floods in every mode; tests named TestLong…), with the race detector: .ci/run runs it after make test
	GO=$(GO) ./scripts/test.sh --long

test-busy: ## the same beside two CPU hogs at nice 19: no test may need an idle machine
	GO=$(GO) ./scripts/test.sh --busy

test-short: ## the tests without the race detector
	$(GO) test -count=1 ./...

bench: ## Go benchmarks of the hot path (engine, shards, server)
	$(GO) test -run '^$$' -bench . -benchmem ./engine ./shards ./server

bench-compare: build ## rlserver vs redis-server side by side (needs redis-server, redis-benchmark); writes $(BENCHOUT)/; BENCHFLAGS='-only durable,idle' runs only those sections
	$(GO) run ./bench/cmd/benchcompare -rlserver bin/rlserver -luaref luaref -out $(BENCHOUT) $(BENCHFLAGS)

bench-cluster: build ## three-node cluster vs a single durable node, fast and strong, rlbench -cluster and redis-benchmark --cluster (about 2.5 min); writes bench/results/cluster.{md,json,png}
	$(GO) run ./bench/cmd/clusterbench -rlserver bin/rlserver -out bench/results $(CLUSTERBENCHFLAGS)

failover: build ## kill -9 the node leading the most groups of a fresh three-node cluster under load, 5 times; writes bench/results/failover.{md,json}
	$(GO) run ./bench/cmd/failover -rlserver bin/rlserver -out bench/results $(FAILOVERFLAGS)

flood: build ## 60 s key flood (redis-benchmark) against --maxmemory 64mb in memory, durable fast and strong, a bystander checking, beside redis-server; writes bench/results/flood-{memory,fast,strong}.{md,json,png}
	$(GO) run ./bench/cmd/soak -rlserver bin/rlserver -name flood-memory -mode memory -d 60s -maxmemory 64mb -redis-server redis-server -out bench/results $(SOAKFLAGS)
	$(GO) run ./bench/cmd/soak -rlserver bin/rlserver -name flood-fast -mode fast -d 60s -maxmemory 64mb -out bench/results $(SOAKFLAGS)
	$(GO) run ./bench/cmd/soak -rlserver bin/rlserver -name flood-strong -mode strong -d 60s -maxmemory 64mb -out bench/results $(SOAKFLAGS)

soak: build ## the same flood for 10 minutes, RSS sampled each second; writes bench/results/soak.{md,json,png}
	$(GO) run ./bench/cmd/soak -rlserver bin/rlserver -name soak -d 10m -maxmemory 256mb -out bench/results $(SOAKFLAGS)

conns: build ## 20,000 connections against rlserver under ulimit -n 4096; writes bench/results/conns.{md,json}
	$(GO) run ./bench/cmd/conns -rlserver bin/rlserver -n 20000 -ulimit 4096 -out bench/results $(CONNSFLAGS)

lint: ## gofmt and go vet
	@test -z "$$(gofmt -l .)" || (gofmt -l . && echo "gofmt needed" && exit 1)
	$(GO) vet ./...

docker: build ## build the rlserver image FROM scratch around bin/rlserver
	docker build -t rlserver:$(VERSION) -t rlserver:latest .

compose: build ## three cluster nodes in containers (docker-compose.yml): RESP 127.0.0.1:7001-7003, HTTP 8001-8003, gRPC 9001-9003
	$(COMPOSE) up --build -d

compose-down: ## stop and remove the compose cluster (its data volumes stay: docker-compose down -v forgets them)
	$(COMPOSE) down

clean: ## remove build output
	rm -rf bin
