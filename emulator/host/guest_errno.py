"""errno values as the firmware's C library numbers them.

SYS_ERRNO hands the firmware the errno of the last failed host call. The host's
numbers are not the guest's: newlib and picolibc (whose ``sys/errno.h`` is newlib's)
agree with Linux only from 1 to 34; ENOSYS, ENOTEMPTY, ENAMETOOLONG, ELOOP and most
network errors differ, and macOS differs again. So pkasim maps by name: host number
-> name (Python's :mod:`errno`) -> newlib's number. The table is newlib 3.3's (Debian 12)
``newlib/libc/include/sys/errno.h``; the tests compare it with the installed header
when the Debian package is there.
"""

from __future__ import annotations

import errno as _host

_TABLE = """
    EPERM 1  ENOENT 2  ESRCH 3  EINTR 4  EIO 5  ENXIO 6
    E2BIG 7  ENOEXEC 8  EBADF 9  ECHILD 10  EAGAIN 11  ENOMEM 12
    EACCES 13  EFAULT 14  ENOTBLK 15  EBUSY 16  EEXIST 17  EXDEV 18
    ENODEV 19  ENOTDIR 20  EISDIR 21  EINVAL 22  ENFILE 23  EMFILE 24
    ENOTTY 25  ETXTBSY 26  EFBIG 27  ENOSPC 28  ESPIPE 29  EROFS 30
    EMLINK 31  EPIPE 32  EDOM 33  ERANGE 34  ENOMSG 35  EIDRM 36
    ECHRNG 37  EL2NSYNC 38  EL3HLT 39  EL3RST 40  ELNRNG 41  EUNATCH 42
    ENOCSI 43  EL2HLT 44  EDEADLK 45  ENOLCK 46  EBADE 50  EBADR 51
    EXFULL 52  ENOANO 53  EBADRQC 54  EBADSLT 55  EDEADLOCK 56  EBFONT 57
    ENOSTR 60  ENODATA 61  ETIME 62  ENOSR 63  ENONET 64  ENOPKG 65
    EREMOTE 66  ENOLINK 67  EADV 68  ESRMNT 69  ECOMM 70  EPROTO 71
    EMULTIHOP 74  ELBIN 75  EDOTDOT 76  EBADMSG 77  EFTYPE 79  ENOTUNIQ 80
    EBADFD 81  EREMCHG 82  ELIBACC 83  ELIBBAD 84  ELIBSCN 85  ELIBMAX 86
    ELIBEXEC 87  ENOSYS 88  ENMFILE 89  ENOTEMPTY 90  ENAMETOOLONG 91  ELOOP 92
    EOPNOTSUPP 95  EPFNOSUPPORT 96  ECONNRESET 104  ENOBUFS 105  EAFNOSUPPORT 106  EPROTOTYPE 107
    ENOTSOCK 108  ENOPROTOOPT 109  ESHUTDOWN 110  ECONNREFUSED 111  EADDRINUSE 112  ECONNABORTED 113
    ENETUNREACH 114  ENETDOWN 115  ETIMEDOUT 116  EHOSTDOWN 117  EHOSTUNREACH 118  EINPROGRESS 119
    EALREADY 120  EDESTADDRREQ 121  EMSGSIZE 122  EPROTONOSUPPORT 123  ESOCKTNOSUPPORT 124  EADDRNOTAVAIL 125
    ENETRESET 126  EISCONN 127  ENOTCONN 128  ETOOMANYREFS 129  EPROCLIM 130  EUSERS 131
    EDQUOT 132  ESTALE 133  ENOTSUP 134  ENOMEDIUM 135  ENOSHARE 136  ECASECLASH 137
    EILSEQ 138  EOVERFLOW 139  ECANCELED 140  ENOTRECOVERABLE 141  EOWNERDEAD 142  ESTRPIPE 143
"""

NEWLIB: dict[str, int] = {}
_fields = _TABLE.split()
for _name, _value in zip(_fields[::2], _fields[1::2]):
    NEWLIB[_name] = int(_value)

EIO = NEWLIB["EIO"]


def guest_errno(host: int) -> int:
    """newlib's number for host errno ``host``; EIO when newlib has no such error."""
    names = sorted(name for name in dir(_host) if name.startswith("E") and getattr(_host, name) == host)
    for name in names:
        if name in NEWLIB:
            return NEWLIB[name]
    return EIO


def guest_name(value: int) -> str:
    """The name of a newlib errno value, for logs (``EACCES``); ``errno N`` if unknown."""
    for name, number in NEWLIB.items():
        if number == value:
            return name
    return f"errno {value}"
