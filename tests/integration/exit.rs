//! The CLI's exit status by the kind of error: 2 when a parameter or the input data is at fault,
//! 1 for any other failure (a file that cannot be read or written, the GPU), with the message on
//! stderr unchanged. Runs the built `seisgpu` binary on the CPU.

use std::process::Command;

fn seisgpu(args: &[&str]) -> (Option<i32>, String) {
    let mut a = vec!["--device", "cpu", "--threads", "1"];
    a.extend(args);
    let out = Command::new(crate::common::seisgpu_bin()).args(&a).output().expect("seisgpu runs");
    (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
}

fn tmp(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("seisgpu-exit-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn a_bad_parameter_exits_with_2() {
    let out = tmp("parameter").join("image.npy");
    let (code, err) = seisgpu(&["ktm", "migrate", "--synthetic", "reflector", "--dx", "-1", "-o", out.to_str().unwrap()]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("image grid: inline spacing dx = -1 m must be positive"), "{err}");
    assert!(!out.exists());
}

#[test]
fn bad_input_data_exits_with_2() {
    // A SEG-Y file shorter than its headers: the data are at fault.
    let dir = tmp("input");
    let input = dir.join("short.sgy");
    std::fs::write(&input, vec![0u8; 1000]).unwrap();
    let (code, err) = seisgpu(&["ktm", "migrate", "--input", input.to_str().unwrap(), "-o", dir.join("i.npy").to_str().unwrap()]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("shorter than the 3600-byte SEG-Y file header"), "{err}");
}

#[test]
fn a_file_error_exits_with_1() {
    let dir = tmp("io");
    let missing = dir.join("no-such-file.sgy");
    let (code, err) = seisgpu(&["ktm", "migrate", "--input", missing.to_str().unwrap(), "-o", dir.join("i.npy").to_str().unwrap()]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains(missing.to_str().unwrap()), "{err}");
    let out = dir.join("no-such-folder").join("image.npy");
    let (code, err) = seisgpu(&["ktm", "migrate", "--synthetic", "reflector", "-o", out.to_str().unwrap()]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("does not exist"), "{err}");
}

#[test]
fn a_file_that_is_not_npy_exits_with_2_and_names_it() {
    let dir = tmp("not-npy");
    let input = dir.join("section.npy");
    std::fs::write(&input, b"plain text, not an array").unwrap();
    let (code, err) = seisgpu(&["plot", input.to_str().unwrap(), "-o", dir.join("s.png").to_str().unwrap()]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains(input.to_str().unwrap()) && err.contains("is not a .npy file"), "{err}");
}

#[test]
fn a_bad_velocity_file_exits_with_2_and_names_it() {
    let dir = tmp("velocity-file");
    let vel = dir.join("vel.txt");
    std::fs::write(&vel, "cdp=1 0.0:1500 0.5:fast\n").unwrap();
    let (code, err) = seisgpu(&["ktm", "migrate", "--synthetic", "reflector", "--velocity", vel.to_str().unwrap(),
        "-o", dir.join("i.npy").to_str().unwrap()]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains(vel.to_str().unwrap()) && err.contains("`fast`"), "{err}");
}

#[test]
fn a_bad_flag_value_exits_with_2_and_names_the_flag() {
    let dir = tmp("flags");
    let (code, err) = seisgpu(&["ktm", "migrate", "--synthetic", "reflector", "--traveltime", "sideways", "-o", dir.join("i.npy").to_str().unwrap()]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("--traveltime `sideways`"), "{err}");
    let (code, err) = seisgpu(&["ktm", "migrate", "--synthetic", "reflector", "--velocity", "0:2000,0.5:-10", "-o", dir.join("i.npy").to_str().unwrap()]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("velocity"), "{err}");

    // A .npy section to plot, then a clip out of range.
    let npy = dir.join("section.npy");
    seisgpu_host::io::npy::write_npy(&npy, &[1.0; 64], &[8, 8]).unwrap();
    let (code, err) = seisgpu(&["plot", npy.to_str().unwrap(), "-o", dir.join("s.png").to_str().unwrap(), "--clip-percentile", "0"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("clip percentile 0 is outside (0, 100]"), "{err}");
}
