# The Java matrix driver (client id "java"): matrix/clients/java built by
# Maven against the pinned kafka-clients of its pom.xml, run on a JRE. The
# container speaks the line-delimited JSON driver protocol (matrix/README.md)
# on stdin and stdout.
#
#   docker build -f docker/java.Dockerfile -t cascade/matrix-java .
#   docker run -i --rm --network host cascade/matrix-java
#
# BUILD_IMAGE needs Maven and a JDK 17+, BASE_IMAGE a Java 17+ runtime
# (build context: the repository root).
ARG BUILD_IMAGE=maven:3.9-eclipse-temurin-17
ARG BASE_IMAGE=eclipse-temurin:17-jre

FROM ${BUILD_IMAGE} AS build
WORKDIR /src
# Resolve plugins and dependencies from the pom alone first, so that a
# changed driver source reuses this layer.
COPY matrix/clients/java/pom.xml pom.xml
RUN mvn -q -B package && rm -rf target
COPY matrix/clients/java/src src
RUN mvn -q -B package \
 && test -f target/classes/Driver.class \
 && ls target/lib/kafka-clients-*.jar > /dev/null

FROM ${BASE_IMAGE}
COPY --from=build /src/target/classes /driver/classes
COPY --from=build /src/target/lib /driver/lib
USER 65534:65534
# As matrix/clients/java runs it: C1 only, since a matrix run is short.
ENTRYPOINT ["java", "-Xmx256m", "-XX:TieredStopAtLevel=1", "-Xshare:auto", "-cp", "/driver/classes:/driver/lib/*", "Driver"]
