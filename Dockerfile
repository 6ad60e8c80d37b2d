# syntax=docker/dockerfile:1
# dtnflow's images for those who build with Docker or Podman:
#   docker build --target manager -t <registry>/dtnflow/manager:<tag> .
#   docker build --target agent   -t <registry>/dtnflow/agent:<tag> .
# then install the chart with manager.image and agent.image pointing there.
# The path tested on our machines (no registry, no daemon) is hack/images/build.sh, which
# makes the same images: one static binary each, the manager as user 65532, the agent as
# root (it reads and writes the sites' storage roots, mounted from the host).
ARG GO_VERSION=1.26

FROM golang:${GO_VERSION} AS build
WORKDIR /src
ENV CGO_ENABLED=0 GOTOOLCHAIN=local
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN go build -trimpath -ldflags='-s -w' -o /out/manager ./cmd/manager \
 && go build -trimpath -ldflags='-s -w' -o /out/dtnflow-agent ./cmd/dtnflow-agent

FROM gcr.io/distroless/static-debian12:nonroot AS manager
COPY --from=build /out/manager /manager
USER 65532:65532
ENTRYPOINT ["/manager"]

# The agent pods get only dtnflow-agent's arguments (agent/contract), so it is the
# entrypoint.
FROM gcr.io/distroless/static-debian12 AS agent
COPY --from=build /out/dtnflow-agent /dtnflow-agent
ENTRYPOINT ["/dtnflow-agent"]
