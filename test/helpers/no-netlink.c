/*
 * Loaded into the tests' Chromium (LD_PRELOAD, test/helpers/browser.ts): socket(AF_NETLINK, ...)
 * fails with EAFNOSUPPORT; every other socket is made as usual.
 *
 * Why: Chromium watches the host's addresses on a netlink socket (net/base/address_tracker_linux.cc)
 * and, when one is added or removed, fails every request still waiting for a connection with
 * ERR_NETWORK_CHANGED. On a test machine the Docker Engine beside the browser adds a bridge
 * address with every network it makes, so a page loaded while another test made one lost its
 * modules and stayed blank (seen in CI; reproduced with 10 networks made beside 20 fetches a step:
 * 73 requests failed). Without the socket, Chromium logs
 * "Could not create NETLINK socket", takes the network as online and never flushes its
 * connections. A student's browser is on another machine: this is the test rig's, not the product's.
 *
 * Built by scripts/provision.sh into a cache named by this file's hash.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stddef.h>
#include <sys/socket.h>

int socket(int domain, int type, int protocol) {
  static int (*next)(int, int, int);
  if (domain == AF_NETLINK) {
    errno = EAFNOSUPPORT;
    return -1;
  }
  if (next == NULL) next = (int (*)(int, int, int))dlsym(RTLD_NEXT, "socket");
  return next(domain, type, protocol);
}
