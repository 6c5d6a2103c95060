# Switchyard — developer entry points. `make test` is what CI runs.
GO ?= go
SWITCHYARD_TEST_DATABASE_URL ?= postgres://postgres@127.0.0.1:5432/test?sslmode=disable
export SWITCHYARD_TEST_DATABASE_URL

.PHONY: run test verify fix bench fuzz compose-config screenshots soak

## run: start the console on its embedded defaults (etcd + SQLite in ./data)
run:
	$(GO) run ./cmd/console

## test: static checks, the whole suite (Postgres, embedded etcd, Chromium), again under the race detector, short fuzz runs
test: verify
	$(GO) test -count=1 -timeout 30m ./...
	$(GO) test -count=1 -race -timeout 30m ./...
	$(MAKE) fuzz FUZZTIME=$(CI_FUZZTIME)

## verify: gofmt, go vet and go mod tidy must leave nothing to change
verify:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { echo "gofmt needed:"; gofmt -l $$(git ls-files '*.go'); exit 1; }
	$(GO) vet ./...
	@cp go.mod /tmp/switchyard.go.mod.bak && cp go.sum /tmp/switchyard.go.sum.bak; \
	$(GO) mod tidy; \
	if ! git diff --quiet -- go.mod go.sum; then \
		git diff -- go.mod go.sum; cp /tmp/switchyard.go.mod.bak go.mod; cp /tmp/switchyard.go.sum.bak go.sum; \
		echo "go mod tidy changes go.mod/go.sum: run 'make fix'"; exit 1; fi

## fix: apply gofmt and go mod tidy
fix:
	gofmt -w $$(git ls-files '*.go')
	$(GO) mod tidy

# FUZZTIME is a duration (30s) or an execution count (100000x). CI uses a count:
# Go 1.26's fuzz coordinator can report a spurious "context deadline exceeded"
# when a duration runs out while a worker is mid-input (go.dev/issue/75804,
# fixed in Go 1.27); a count has no deadline to race. 60000x is about 10 s here.
FUZZTIME ?= 30s
CI_FUZZTIME ?= 60000x
## fuzz: run every fuzz target for FUZZTIME each
fuzz:
	@for pkg in $$($(GO) list ./...); do \
		for f in $$($(GO) test -list '^Fuzz' $$pkg 2>/dev/null | grep '^Fuzz'); do \
			echo "fuzz $$pkg $$f"; \
			$(GO) test $$pkg -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) || exit 1; \
		done; \
	done

## bench: the benchmarks behind the performance targets
bench:
	$(GO) test ./sdk -run '^$$' -bench . -benchmem
	$(GO) test ./sdk/... -run '^$$' -bench 'Allow|Breaker|Admit' -benchmem
	$(GO) test ./server/... -run '^$$' -bench 'Flip$$'
	$(GO) test ./server/console -run '^$$' -bench FlipUnderJobs -benchtime 500x
	$(GO) test ./server/fleet -run '^$$' -bench Scale -benchtime 1x

# SOAK is the soak run's length; SWITCHYARD_SOAK_INSTANCES (10000),
# SWITCHYARD_SOAK_OPERATORS (100) and SWITCHYARD_SOAK_STREAMS (50) size it.
SOAK ?= 10m
## soak: the production-shaped soak run docs/production.md sizes from (3 consoles, a 3-member etcd, a simulated fleet)
soak:
	SWITCHYARD_SOAK=$(SOAK) $(GO) test ./server/console -run '^TestSoak$$' -count=1 -timeout 60m -v

## screenshots: regenerate docs/screenshots/*.png from a seeded console in headless Chromium
screenshots:
	$(GO) test ./server/webui -run TestScreenshots -update-screenshots -count=1

## compose-config: validate docker-compose.yml with the compose client (no engine needed;
## Debian: apt-get install docker-compose). `go test ./deploy` checks its shape without it.
compose-config:
	@if docker compose version >/dev/null 2>&1; then docker compose config --quiet; else docker-compose config --quiet; fi
