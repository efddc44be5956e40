"""The one immutable record base (``Record``) of what the package writes as JSON and reads back: the request
files (requests.py) and the verdict's values (verdict/types.py).  A record's fields never change after it is
made (``replace`` makes a copy), keys this release does not know are kept (``extra``), and two records are
equal where their JSON is.  The rank documents (documents.py) are ``typing.NamedTuple`` records, immutable by
construction, as torch's flight-recorder analyser's are; NamedTuple takes no base of ours.  No imports of the
package."""


class Record(object):
    """Immutable fields and ``extra``; a subclass says which fields were given (``_given``) and how it turns
    into JSON (``to_json``) and back (``from_json``)."""

    __slots__ = ()

    def __setattr__(self, name, value):
        raise AttributeError("%s is immutable: use replace()" % type(self).__name__)

    def __delattr__(self, name):
        raise AttributeError("%s is immutable: use replace()" % type(self).__name__)

    def _given(self):
        """{field: value} of the fields given (where a record keeps which were: those only)."""
        raise NotImplementedError

    def replace(self, **changes):
        """A copy with some fields changed (``extra`` kept)."""
        values = self._given()
        values.update(changes)
        return type(self)(extra=self.extra, **values)

    def __eq__(self, other):
        return type(other) is type(self) and other.to_json() == self.to_json()

    def __ne__(self, other):
        return not self == other

    __hash__ = None
