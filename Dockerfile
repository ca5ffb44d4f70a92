# A small image of the Guardian: `docker build -t warden .` then
# `docker run -p 8700:8700 warden` (HTTP on port 8700, the embedded default policy), or mount a
# policy and a state folder: `docker run -v $PWD/policy:/policy -v warden-state:/state -p 8700:8700
# warden serve --listen 0.0.0.0:8700 --policy /policy/main.ward --state /state`.

# Build: the `dist` profile (release, stripped).
FROM rust:1-slim-bookworm AS build
ARG WARDEN_COMMIT=unknown
ENV WARDEN_COMMIT=${WARDEN_COMMIT}
WORKDIR /src
COPY . .
RUN cargo build --locked --profile dist --bin warden

# Run: the binary alone on a slim base, as an unprivileged user.
FROM debian:bookworm-slim
COPY --from=build /src/target/dist/warden /usr/local/bin/warden
RUN mkdir /state && chown 65534:65534 /state
USER 65534:65534
EXPOSE 8700
ENTRYPOINT ["warden"]
CMD ["serve", "--listen", "0.0.0.0:8700"]
