# The commands a user and CI run. Each installs what it needs first.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
INSTALLED := $(VENV)/.installed
LAYER_DIR := .build/layer
LAYER_HASH := $(shell cat layers/requirements.txt Makefile 2>/dev/null | sha256sum | cut -c1-16)
LAYER_STAMP := $(LAYER_DIR)/.built-$(LAYER_HASH)
CDK := node_modules/.bin/cdk

# Never a real AWS account here: fake credentials, a region, and no instance-metadata probe.
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := 20
LOCAL_AWS := AWS_ACCESS_KEY_ID=testing AWS_SECRET_ACCESS_KEY=testing AWS_SESSION_TOKEN=testing \
	AWS_DEFAULT_REGION=us-east-1 AWS_REGION=us-east-1 AWS_EC2_METADATA_DISABLED=true

.PHONY: run test synth deploy install layer bench clean browser doc-tools

run: $(INSTALLED) $(LAYER_STAMP)  ## the whole scheduler locally, on an embedded AWS emulator (RESET=1: start empty)
	$(LOCAL_AWS) JOBSCHED_RESET=$(RESET) $(BIN)/python -m jobsched.local

test: $(INSTALLED) $(LAYER_STAMP) browser doc-tools  ## the whole test suite
	$(LOCAL_AWS) $(BIN)/python -m pytest -n 2 --dist worksteal -m "not realtime" --durations=40
	$(LOCAL_AWS) $(BIN)/python -m pytest -m realtime

# The console's browser test drives Debian's Chromium headless through its ChromeDriver.
browser:
	@command -v chromium >/dev/null && command -v chromedriver >/dev/null || \
		{ echo "installing Debian's chromium and chromium-driver (the console's browser test)"; \
		  (apt-get update -qq && apt-get install -y -qq chromium chromium-driver >/dev/null) || \
		  (sudo apt-get update -qq && sudo apt-get install -y -qq chromium chromium-driver >/dev/null); }

# The guide's doc test (tests/e2e/test_guide.py) runs the README's and docs/guide's commands, which use curl and jq.
doc-tools:
	@command -v curl >/dev/null && command -v jq >/dev/null || \
		{ echo "installing Debian's curl and jq (the guide's doc test)"; \
		  (apt-get update -qq && apt-get install -y -qq curl jq >/dev/null) || \
		  (sudo apt-get update -qq && sudo apt-get install -y -qq curl jq >/dev/null); }

# CDK_CONTEXT: context for the CDK app, e.g. CDK_CONTEXT="-c regions=us-east-1,eu-west-1,us-west-2"
# (one stack per region: docs/operations.md, "Five regions").
CDK_CONTEXT ?=

synth: $(INSTALLED) $(LAYER_STAMP) $(CDK)  ## CloudFormation template into cdk.out/, offline
	AWS_EC2_METADATA_DISABLED=true $(CDK) synth --quiet $(CDK_CONTEXT)
	@echo "templates: $$(ls cdk.out/*.template.json | tr '\n' ' ')"

# deploy: synthesize, check that the account's Lambda concurrency can hold what the stacks reserve
# (Lambda keeps 100 unreserved; infra/jobsched_infra/concurrency_check.py says what to do if not:
# a quota increase, or CDK_CONTEXT="-c reservedConcurrency=off"), then deploy what was synthesized.
deploy: $(INSTALLED) $(LAYER_STAMP) $(CDK)  ## cdk deploy, with your AWS credentials
	AWS_EC2_METADATA_DISABLED=true $(CDK) synth --quiet $(CDK_CONTEXT)
	$(BIN)/python -m jobsched_infra.concurrency_check cdk.out
	$(CDK) deploy --app cdk.out $(CDK_CONTEXT) $(if $(CDK_CONTEXT),--all)

bench: $(INSTALLED) $(LAYER_STAMP)  ## benchmarks that print figures (see docs/performance.md)
	$(LOCAL_AWS) $(BIN)/python -m bench

install: $(INSTALLED)
layer: $(LAYER_STAMP)

$(INSTALLED): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $@

# The functions' dependency layer: manylinux wheels for Lambda's Python 3.14 on arm64,
# installed with pip (no Docker). Cached until layers/requirements.txt changes. No bytecode: pip
# would compile for this machine's Python, which Lambda's 3.14 ignores (dead weight in the layer).
$(LAYER_STAMP): layers/requirements.txt | $(INSTALLED)
	rm -rf $(LAYER_DIR)
	$(BIN)/pip install --quiet --no-compile --target $(LAYER_DIR)/python --platform manylinux2014_aarch64 \
		--implementation cp --python-version 3.14 --only-binary=:all: -r layers/requirements.txt
	find $(LAYER_DIR) -name __pycache__ -type d -prune -exec rm -rf {} +
	touch $@

$(CDK): package.json
	npm install --no-audit --no-fund --silent
	touch $@

clean:
	rm -rf .build cdk.out node_modules .pytest_cache
