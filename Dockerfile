# EAR's image: `ear` on the PATH (what deploy/helm/ear runs as `ear serve …` or `ear epp …`).
# Build: docker build -t ear:0.1.0 .   (Node 20: the pinned uWebSockets.js ships binaries for Node 16–20 only)
FROM node:20-bookworm-slim AS build
WORKDIR /ear
# node-gyp's toolchain, for a native addon without a prebuilt binary for this platform.
RUN apt-get update && apt-get install -y --no-install-recommends python3 make g++ && rm -rf /var/lib/apt/lists/*
COPY package.json package-lock.json ./
COPY asm asm
COPY bench bench
COPY proto proto
COPY scripts scripts
COPY src src
COPY test test
COPY workers workers
COPY tsconfig.json ./
# npm ci builds (its `prepare` runs the AssemblyScript and TypeScript builds); then only runtime packages stay.
RUN npm ci && npm prune --omit=dev

FROM node:20-bookworm-slim
WORKDIR /ear
ENV NODE_ENV=production
# V8's young generation at 64 MB a semi-space: a request's objects die young, and fewer scavenges cost ~20% less
# CPU a request (bench/RESULTS.md, "V8's young generation"). Every thread of the process takes it.
ENV NODE_OPTIONS=--max-semi-space-size=64
COPY --from=build /ear/package.json ./
COPY --from=build /ear/node_modules node_modules
COPY --from=build /ear/dist dist
COPY --from=build /ear/build build
COPY --from=build /ear/proto proto
# Engine profiles are read from src/ at run time (ear sim, --demo, the KV connectors' cost estimate).
COPY --from=build /ear/src/engine-model/profiles src/engine-model/profiles
RUN chmod +x dist/src/cli/ear.js && ln -s /ear/dist/src/cli/ear.js /usr/local/bin/ear
USER node
# 8080: ear serve; 9002 ext_proc, 9003 gRPC health, 9090 metrics: ear epp.
EXPOSE 8080 9002 9003 9090
ENTRYPOINT ["ear"]
CMD ["serve", "--demo", "4", "--host", "0.0.0.0"]
