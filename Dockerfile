# The image is built FROM scratch around the static binary that `make build`
# produces (CGO_ENABLED=0), so building it pulls nothing: run `make docker`.
# The flags come from RLSERVER_* variables (every flag has one); the
# defaults below serve on every interface with the data in the /data volume.
# `docker run -e RLSERVER_CONSISTENCY=strong rlserver` and
# `docker run rlserver --consistency strong` both work; a flag beats the
# environment.
#
# The server runs as the unprivileged user 65532 (no /etc/passwd needed).
# /data is bin/data, an empty directory `make build` makes, copied in owned
# by that user: a new named or anonymous volume on /data takes its owner, so
# the server can write there. A bind mount must be writable by uid 65532
# (chown 65532:65532 DIR).
FROM scratch
COPY bin/rlserver /rlserver
COPY --chown=65532:65532 bin/data /data
ENV RLSERVER_LISTEN=0.0.0.0:6379 \
    RLSERVER_HTTP=0.0.0.0:8080 \
    RLSERVER_GRPC=0.0.0.0:8081 \
    RLSERVER_DATA_DIR=/data
VOLUME /data
USER 65532:65532
# RESP, HTTP, Envoy's rate limit service (gRPC, --grpc; Envoy in another
# container reaches it at <container>:8081), and Raft (--raft-addr, a
# cluster's own traffic).
EXPOSE 6379 8080 8081 7379
# `rlserver health` GETs /readyz at RLSERVER_HTTP: healthy once the node can
# serve checks (in a cluster: every slot has a leader; the disk above
# --min-free-disk) and, when the rate limit service is on (/readyz names its
# address), its grpc.health.v1 answers SERVING.
HEALTHCHECK --interval=5s --timeout=3s --start-period=30s --retries=3 CMD ["/rlserver", "health"]
ENTRYPOINT ["/rlserver"]
