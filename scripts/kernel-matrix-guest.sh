#!/usr/bin/env bash
# Inside a kernel-vm guest (scripts/kernel-matrix.sh starts it): runs the test classes of the
# matrix with the JUnit console launcher on the class paths the host prepared, the fast path
# required, as scripts/test.sh runs them on the host. Code runs 10-20x slower under emulation: the
# tests' waits are ten times longer (sockmap4j.test.waitScale) and their @Timeouts off, the VM's
# timeout bounds the run. Arguments: smoke|full, the matrix directory.
set -uo pipefail
MODE=$1
MATRIX=$2
ROOT=$(cd "$(dirname "$0")/.." && pwd)
JAVA_HOME=${JAVA_HOME:-$(ls -d /usr/lib/jvm/*25* 2>/dev/null | head -1)}

# The test classes of each module; docs/kernel.md ("Other kernels") says what each covers.
SMOKE_NETTY=(--select-class io.github.sockmap4j.netty.KernelSmokeTest
             --select-method 'io.github.sockmap4j.netty.grpc.GrpcFastPathTest#unary')
# CreditFlowTest without its 1 GiB streams (minutes each under emulation).
FULL_CORE=(FastPathChannelTest kernel.OrderingTest ProcessBoundaryTest kernel.NetnsTest NoDrainObjectTest xdp.XdpFilterTest
           'CreditFlowTest#aWriterHoldsAtTheWatchersEstimateForAReaderThatPublishesNothing'
           'CreditFlowTest#aWriterWaitingForCreditGetsTheCloseOfItsReader'
           'CreditFlowTest#aWriterWaitingForCreditGetsAnErrorWhenItsReaderIsKilled'
           'CreditFlowTest#aNonBlockingWriterWithoutCreditWritesNothingAndIsNotSelected')
FULL_NETTY=(netty.KernelSmokeTest netty.NettyFastPathTest netty.grpc.GrpcFastPathTest netty.grpc.GrpcServiceVipTest)

launch() { # MODULE SELECTORS...
  local module=$1; shift
  echo "== $module: $*"
  (cd "$ROOT/$module" && "$JAVA_HOME/bin/java" --enable-native-access=ALL-UNNAMED -Dsockmap4j.require=true \
    -Dsockmap4j.kernelTests=true -Dsockmap4j.test.waitScale=10 -XX:TieredStopAtLevel=1 \
    -cp "$(cat "$MATRIX/$module.cp")" org.junit.platform.console.ConsoleLauncher execute --disable-banner \
    --disable-ansi-colors --details=tree --fail-if-no-tests \
    --config=junit.jupiter.extensions.autodetection.enabled=true \
    --config=junit.jupiter.execution.timeout.mode=disabled \
    --reports-dir="$SM4J_VM_OUT/reports-$module" "$@")
}

status=0
if [ "$MODE" = smoke ]; then
  launch netty-transport "${SMOKE_NETTY[@]}" || status=$?
else
  sel=() # a name with '#' is a method
  for c in "${FULL_NETTY[@]}"; do [[ $c == *'#'* ]] && sel+=(--select-method "io.github.sockmap4j.$c") \
                                                   || sel+=(--select-class "io.github.sockmap4j.$c"); done
  launch netty-transport "${sel[@]}" || status=$?
  sel=()
  for c in "${FULL_CORE[@]}"; do [[ $c == *'#'* ]] && sel+=(--select-method "io.github.sockmap4j.$c") \
                                                  || sel+=(--select-class "io.github.sockmap4j.$c"); done
  launch core "${sel[@]}" || status=$?
fi
exit "$status"
