# An etcd image for the Compose example and its test: Debian's etcd binary
# and the shared libraries it needs, FROM scratch (no image can be pulled).
FROM scratch
COPY rootfs/ /
ENTRYPOINT ["/usr/bin/etcd"]
