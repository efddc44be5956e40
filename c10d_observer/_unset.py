"""The "argument not given" sentinel, in a module of its own so that importing the package stays cheap."""


class _Unset(object):
    def __repr__(self):
        return "<unset>"


UNSET = _Unset()
