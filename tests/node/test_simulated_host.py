import os

from nanokube.node.simulated_host import KERNEL_VERSION, OS_IMAGE, node_root, on_node, system_info


def test_a_simulated_nodes_root_is_made_once_with_its_os_release_and_hostname(tmp_path):
    root = node_root(str(tmp_path), "gpu-3")
    assert root == str(tmp_path / "rootfs")
    assert (tmp_path / "rootfs/etc/hostname").read_text() == "gpu-3\n"
    assert f'PRETTY_NAME="{OS_IMAGE}"\n' in (tmp_path / "rootfs/etc/os-release").read_text()
    assert (tmp_path / "rootfs/var/log/pods").is_dir() and (tmp_path / "rootfs/var/lib/kubelet").is_dir()
    assert os.stat(tmp_path / "rootfs/tmp").st_mode & 0o7777 == 0o1777
    (tmp_path / "rootfs/etc/hostname").write_text("kept\n")
    assert node_root(str(tmp_path), "gpu-3") == root and (tmp_path / "rootfs/etc/hostname").read_text() == "kept\n"


def test_a_host_path_cannot_climb_out_of_the_nodes_root():
    assert on_node("/r", "/var/log") == "/r/var/log"
    assert on_node("/r", "/../../etc/passwd") == "/r/etc/passwd"
    assert on_node("/r", "/") == "/r"
    assert on_node("/r", "tmp/../opt/") == "/r/opt"


def test_a_node_on_this_host_reports_its_os_image_and_kernel():
    assert system_info(False) == (OS_IMAGE, KERNEL_VERSION)
    image, kernel = system_info(True)
    assert kernel == os.uname().release and image and image != OS_IMAGE
