#pragma once
// Is a rank's process still there? A rank that waits for a lower rank to dial it
// (connector.h, "rule") cannot tell a slow peer from a dead one by waiting. Every rank's
// listener stays open from the build to the communicator's end, so a connection to its
// published address that is refused (the host answers with a reset) means the process
// is gone; one that is accepted means it is alive (the probe then says so with
// kProbeMagic, and the listener drops it quietly). A silent host (timeout) or any other
// error says nothing either way.
#include <string>

#include "comm/net/socket.h"
#include "comm/work.h"

namespace dpt::tcp {

enum class Liveness { alive, refused, unknown };

// One probe of host:port, waiting at most `timeout` for the connection.
Liveness probe_listener(const std::string& host, int port, net::Family family, Millis timeout);

}  // namespace dpt::tcp
