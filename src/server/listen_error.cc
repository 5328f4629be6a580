#include "server/listen_error.h"

#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace dsv4::server {

std::string listen_error(const std::string& host, int port) {
  const std::string where = host + ":" + std::to_string(port);
  addrinfo hints{}, *found = nullptr;
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  if (const int rc = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found); rc != 0)
    return "cannot listen on " + where + ": --host " + host + " is not an address (" + ::gai_strerror(rc) + ")";
  // Bind as the server does (SO_REUSEADDR) to learn the reason.
  int err = 0;
  const int fd = ::socket(found->ai_family, found->ai_socktype, found->ai_protocol);
  if (fd < 0) {
    err = errno;
  } else {
    const int yes = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    if (::bind(fd, found->ai_addr, found->ai_addrlen) != 0) err = errno;
    ::close(fd);
  }
  ::freeaddrinfo(found);
  switch (err) {
    case EADDRINUSE:
      return "cannot listen on " + where + ": port " + std::to_string(port) +
             " is in use (another server?); choose another with --port, or --port 0 for any free one";
    case EACCES:
      return "cannot listen on " + where + ": ports below 1024 need privileges; choose --port 1024 or above";
    case EADDRNOTAVAIL:
      return "cannot listen on " + where + ": " + host + " is not an address of this machine (--host)";
    case 0:
      return "cannot listen on " + where + " (the port was free a moment later: try again)";
    default:
      return "cannot listen on " + where + ": " + std::strerror(err);
  }
}

}  // namespace dsv4::server
