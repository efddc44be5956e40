import c10d_observer

def test_version():
    assert c10d_observer.__version__
