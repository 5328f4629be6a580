// Why `serve` cannot listen on host:port, in words a user can act on (the HTTP library only says
// that it failed): the port in use, a privileged port, an address this machine does not have.
#pragma once
#include <string>

namespace dsv4::server {

std::string listen_error(const std::string& host, int port);

}  // namespace dsv4::server
