# The README's test command: the Go tests, then the hosts suite (e2e/run), which drives the
# built binary with the official MCP TypeScript SDK clients.
.PHONY: test test-go test-e2e
test: test-go test-e2e

# GOTESTFLAGS: more go test flags, e.g. -count=1 (CI) or -run NAME.
test-go:
	go test -race $(GOTESTFLAGS) ./...

test-e2e:
	bash e2e/run

# The binary into $GOBIN, else $(go env GOPATH)/bin (~/go/bin), with the commit recorded when
# built in a clone (cardwriter-mcp version shows it).
.PHONY: install
install:
	go install -buildvcs=auto ./cmd/cardwriter-mcp
